//! Durable runs (docs/exec-server.md, "Runs"): the run id a request may carry, and the bodies of `GET /runs`, `GET
//! /runs/{id}` and `POST /runs/{id}/signal`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// A client-chosen name for a run: 1..=64 bytes, the first `[A-Za-z0-9]`, the rest `[A-Za-z0-9._-]`. Bounded and
/// plain because it travels in URLs and names spill files: no separators, no `..`, nothing to escape. Deserializing
/// validates, so a body with a bad id is refused with the rule in the message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RunId(String);

/// The longest run id, in bytes (a UUID is 36, 32 hex digits are 32).
pub const MAX_RUN_ID_BYTES: usize = 64;

/// Why a string is not a run id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunIdError {
    Empty,
    TooLong {
        bytes: usize,
    },
    /// The first byte is not a letter or digit.
    BadStart,
    /// A byte other than a letter, digit, `.`, `_` or `-`, at this byte index.
    BadByte {
        index: usize,
    },
}

impl fmt::Display for RunIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("run_id ")?;
        match self {
            RunIdError::Empty => f.write_str("is empty: it must hold 1 to 64 bytes")?,
            RunIdError::TooLong { bytes } => write!(f, "is {bytes} bytes long: it may hold at most 64")?,
            RunIdError::BadStart => f.write_str("starts with a byte that is not a letter or digit: it must")?,
            RunIdError::BadByte { index } => write!(
                f,
                "has a byte at index {index} that is not a letter, digit, '.', '_' or '-': only those are allowed"
            )?,
        }
        f.write_str("; use e.g. a UUID")
    }
}

impl std::error::Error for RunIdError {}

impl RunId {
    /// `id` if it is a valid run id.
    pub fn new(id: impl Into<String>) -> Result<Self, RunIdError> {
        let id = id.into();
        let bytes = id.as_bytes();
        match bytes.first() {
            None => return Err(RunIdError::Empty),
            Some(_) if bytes.len() > MAX_RUN_ID_BYTES => return Err(RunIdError::TooLong { bytes: bytes.len() }),
            Some(first) if !first.is_ascii_alphanumeric() => return Err(RunIdError::BadStart),
            Some(_) => {}
        }
        if let Some(index) = bytes.iter().position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')))
        {
            return Err(RunIdError::BadByte { index });
        }
        Ok(RunId(id))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for RunId {
    type Err = RunIdError;
    fn from_str(id: &str) -> Result<Self, RunIdError> {
        RunId::new(id)
    }
}

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        RunId::new(id).map_err(serde::de::Error::custom)
    }
}

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Running,
    /// Ended by itself (any exit code or signal).
    Exited,
    /// Stopped by its `timeout` or `idle_timeout` (exit code 124).
    TimedOut,
    /// Stopped on request (`DELETE`, shutdown) or because no client reattached within the window.
    Cancelled,
}

/// One run, as `GET /runs/{id}` and the list show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    pub id: RunId,
    pub argv: Vec<String>,
    pub cwd: String,
    pub started_unix_ms: u64,
    pub state: RunState,
    /// `null` while running; -1 for a run whose command never started (as in the `/exec` reply).
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub error: Option<String>,
    /// Each stream's length so far, dropped bytes included.
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Bytes of both streams not kept (the middle beyond the per-run cap).
    pub dropped_bytes: u64,
    /// How many clients are reading it now.
    pub attached: u32,
    /// So far while running; the whole run once ended.
    pub duration_ms: u64,
    /// Why it was stopped, once something stopped it (absent while running and when it ended by itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<crate::StoppedBy>,
    /// Extension (docs/exec-server.md, "TTY runs"): the run's command is on a pseudo-terminal. Absent (false)
    /// otherwise.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tty: bool,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_false(value: &bool) -> bool {
    !*value
}

/// `GET /runs`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunList {
    pub runs: Vec<RunInfo>,
}

/// `POST /runs/{id}/signal` body: TERM, INT, HUP, KILL, USR1, USR2, QUIT, TSTP, STOP, CONT or WINCH, with or without
/// the `SIG` prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalRequest {
    pub signal: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_follow_the_rule() {
        for good in ["a", "0", "0b9e6c7e-1d2f-4c1a-9b7e-2f1e3d4c5b6a", "A.b_c-d", &"x".repeat(64)] {
            assert_eq!(RunId::new(good).unwrap().as_str(), good);
        }
        assert_eq!(RunId::new(""), Err(RunIdError::Empty));
        assert_eq!(RunId::new("x".repeat(65)), Err(RunIdError::TooLong { bytes: 65 }));
        assert_eq!(RunId::new("../x"), Err(RunIdError::BadStart));
        assert_eq!(RunId::new(".x"), Err(RunIdError::BadStart));
        assert_eq!(RunId::new("-x"), Err(RunIdError::BadStart));
        assert_eq!(RunId::new("a/b"), Err(RunIdError::BadByte { index: 1 }));
        assert_eq!(RunId::new("a b"), Err(RunIdError::BadByte { index: 1 }));
        assert_eq!(RunId::new("aé"), Err(RunIdError::BadByte { index: 1 }));
    }

    #[test]
    fn a_bad_id_in_json_names_the_rule() {
        let err = serde_json::from_str::<RunId>(r#""../x""#).unwrap_err().to_string();
        assert!(err.starts_with("run_id ") && err.contains("use e.g. a UUID"), "{err}");
        let err = serde_json::from_str::<RunId>(&format!("\"{}\"", "a".repeat(65))).unwrap_err().to_string();
        assert!(err.contains("65 bytes long"), "{err}");
        assert_eq!(serde_json::from_str::<RunId>(r#""ok-1""#).unwrap().to_string(), "ok-1");
    }

    #[test]
    fn run_info_writes_nulls_and_snake_case_states() {
        let info = RunInfo {
            id: RunId::new("r1").unwrap(),
            argv: vec!["make".into()],
            cwd: "/w".into(),
            started_unix_ms: 1,
            state: RunState::TimedOut,
            exit_code: None,
            signal: None,
            error: None,
            stdout_bytes: 2,
            stderr_bytes: 3,
            dropped_bytes: 0,
            attached: 1,
            duration_ms: 4,
            stopped_by: None,
            tty: false,
        };
        let json = serde_json::to_string(&info).unwrap();
        assert_eq!(
            json,
            r#"{"id":"r1","argv":["make"],"cwd":"/w","started_unix_ms":1,"state":"timed_out","exit_code":null,"signal":null,"error":null,"stdout_bytes":2,"stderr_bytes":3,"dropped_bytes":0,"attached":1,"duration_ms":4}"#
        );
        assert_eq!(serde_json::from_str::<RunInfo>(&json).unwrap(), info);
        let list: RunList = serde_json::from_str(&format!(r#"{{"runs":[{json}]}}"#)).unwrap();
        assert_eq!(list.runs, std::slice::from_ref(&info));
        let stopped = RunInfo { stopped_by: Some(crate::StoppedBy::Timeout), ..info };
        let json = serde_json::to_string(&stopped).unwrap();
        assert!(json.ends_with(r#""duration_ms":4,"stopped_by":"timeout"}"#), "{json}");
        assert_eq!(serde_json::from_str::<RunInfo>(&json).unwrap(), stopped);
        let terminal = RunInfo { tty: true, ..stopped };
        let json = serde_json::to_string(&terminal).unwrap();
        assert!(json.ends_with(r#""stopped_by":"timeout","tty":true}"#), "{json}");
        assert_eq!(serde_json::from_str::<RunInfo>(&json).unwrap(), terminal);
        let signal: SignalRequest = serde_json::from_str(r#"{"signal":"SIGTERM"}"#).unwrap();
        assert_eq!(signal.signal, "SIGTERM");
    }
}
