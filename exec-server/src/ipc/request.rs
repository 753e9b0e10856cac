//! The tool-sidecar request and result documents, routing, and the rules that turn a request into a job.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::{Collected, Job, Outcome, StartError};

/// Bytes of stdout and of stderr a result carries, as the protocol's executors cut them.
pub const OUTPUT_CAP: usize = 51_200;
/// Appended to output that was cut.
pub const TRUNCATED: &str = "...(truncated)";
/// The protocol's default timeout, in seconds.
pub const DEFAULT_TIMEOUT: u64 = 30;
/// How long the agent waits past a request's timeout before giving up on it.
pub const AGENT_PATIENCE: Duration = Duration::from_secs(10);

/// `exec-request-{id}.json`. Every field is optional on the wire; the id comes from the file name.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolRequest {
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Option<Vec<String>>,
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub work_dir: Option<String>,
    /// Seconds; any JSON value, read leniently as the shell executors do (`jq '.timeout // 30'`).
    #[serde(default)]
    pub timeout: Option<serde_json::Value>,
    #[serde(default)]
    pub target: Option<String>,
}

/// `exec-result-{id}.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub id: String,
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

/// Exit code of a result for a request that could not be read or had nothing to run (a usage error).
pub const EXIT_BAD_REQUEST: i32 = 2;

impl ToolResult {
    /// A result that explains, on stderr, why nothing ran.
    pub fn refused(id: &str, exit_code: i32, message: impl Into<String>) -> Self {
        ToolResult {
            id: id.to_owned(),
            exit_code,
            stdout: String::new(),
            stderr: format!("exec-server: {}\n", message.into()),
            timed_out: false,
        }
    }

    pub fn from_outcome(id: &str, outcome: &Outcome<Collected>) -> Self {
        let mut stderr = capped(&outcome.stderr.bytes, outcome.stderr.truncated);
        if outcome.cancelled {
            stderr.push_str("\nexec-server: command cancelled: the run is over or the executor is shutting down\n");
        }
        ToolResult {
            id: id.to_owned(),
            exit_code: outcome.exit_code,
            stdout: capped(&outcome.stdout.bytes, outcome.stdout.truncated),
            stderr,
            timed_out: outcome.timed_out,
        }
    }

    /// A command that never started: 127 for a missing program and 126 for one that cannot run (as a shell
    /// reports them), 1 otherwise.
    pub fn not_started(id: &str, err: &StartError) -> Self {
        let code = match err {
            StartError::NotFound { .. } => 127,
            StartError::PermissionDenied { .. } => 126,
            StartError::WorkingDirectory { .. } | StartError::Other(_) => 1,
        };
        ToolResult::refused(id, code, format!("failed to start command: {err}"))
    }
}

fn capped(bytes: &[u8], truncated: bool) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    if truncated {
        text.push_str(TRUNCATED);
    }
    text
}

/// Lowercase with all whitespace removed: how the protocol compares a request's target with a skill pack.
pub fn normalize_target(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).flat_map(char::to_lowercase).collect()
}

/// Whether this executor takes a request with `target`: an unset skill pack takes everything, an empty target goes
/// to anyone, otherwise the two must match.
pub fn routed_here(target: Option<&str>, skill_pack: Option<&str>) -> bool {
    let Some(own) = skill_pack.map(normalize_target).filter(|own| !own.is_empty()) else { return true };
    let target = target.map(normalize_target).unwrap_or_default();
    target.is_empty() || target == own
}

/// The timeout of a request: default 30, clamped to `min..=max`; a value that is not a number counts as absent
/// (as `jq '.timeout // 30'` would have it).
pub fn timeout_of(value: Option<&serde_json::Value>, min: u64, max: u64) -> u64 {
    let requested = match value {
        Some(serde_json::Value::Number(n)) => n.as_f64().unwrap_or(DEFAULT_TIMEOUT as f64),
        Some(serde_json::Value::String(s)) => s.trim().parse().unwrap_or(DEFAULT_TIMEOUT as f64),
        _ => DEFAULT_TIMEOUT as f64,
    };
    // The shell executors set anything below 1 to the default, and anything above the cap to the cap.
    let seconds = if requested < 1.0 { DEFAULT_TIMEOUT } else { requested.min(max as f64) as u64 };
    seconds.clamp(min, max)
}

/// Why a parsed request has nothing that can run: answered with [`EXIT_BAD_REQUEST`] and this on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRequest {
    /// `argv` is there, but its first element is empty.
    EmptyProgram,
    /// Neither a non-empty `argv` nor a `command` that is more than whitespace.
    NothingToRun,
    /// A NUL byte in the command or an argument, which no argument of a program can hold.
    NulByte,
}

impl fmt::Display for BadRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BadRequest::EmptyProgram => "argv[0] is empty: it must name the program to run",
            BadRequest::NothingToRun => "the request has neither a command nor an argv: nothing to run",
            BadRequest::NulByte => "the command contains a NUL byte, which no argument can hold",
        })
    }
}

impl std::error::Error for BadRequest {}

/// Turns a parsed request into a job: argv mode when `argv` is a non-empty array (no shell, optional stdin),
/// otherwise shell mode, `bash -c "<command> <args joined by spaces>"`.
pub fn job_of(
    request: &ToolRequest,
    default_workdir: &Path,
    env: &[(OsString, OsString)],
    min_timeout: u64,
    max_timeout: u64,
) -> Result<Job, BadRequest> {
    let argv: Vec<OsString> = match request.argv.as_deref() {
        Some(argv) if !argv.is_empty() => {
            if argv[0].is_empty() {
                return Err(BadRequest::EmptyProgram);
            }
            argv.iter().map(OsString::from).collect()
        }
        _ => {
            let command = request.command.as_deref().unwrap_or("");
            if command.trim().is_empty() {
                return Err(BadRequest::NothingToRun);
            }
            let mut line = command.to_owned();
            for arg in request.args.iter().flatten() {
                line.push(' ');
                line.push_str(arg);
            }
            vec!["bash".into(), "-c".into(), line.into()]
        }
    };
    if argv.iter().any(|arg| arg.as_encoded_bytes().contains(&0)) {
        return Err(BadRequest::NulByte);
    }
    let cwd = match request.work_dir.as_deref() {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => default_workdir.to_path_buf(),
    };
    let stdin = match (&request.argv, &request.stdin) {
        (Some(argv), Some(stdin)) if !argv.is_empty() => Some(stdin.clone().into_bytes()),
        _ => None,
    };
    Ok(Job {
        argv,
        cwd: cwd.into(),
        env: env.to_vec(),
        stdin,
        stdin_stream: None,
        terminal: None,
        timeout: Duration::from_secs(timeout_of(request.timeout.as_ref(), min_timeout, max_timeout)),
        idle_timeout: None,
        group: None,
        drain_now: None,
        end_daemons: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::DirProblem;
    use serde_json::json;

    #[test]
    fn routing_matrix() {
        let cases = [
            (None, None, true),
            (Some("pack"), None, true),
            (None, Some("pack"), true),
            (Some(""), Some("pack"), true),
            (Some("pack"), Some("pack"), true),
            (Some(" My Pack "), Some("my-pack"), false),
            (Some(" My Pack\t"), Some("mypack"), true),
            (Some("MYPACK"), Some("my pack"), true),
            (Some("other"), Some("pack"), false),
            (Some("other"), Some("  "), true),
        ];
        for (target, pack, expected) in cases {
            assert_eq!(routed_here(target, pack), expected, "{target:?} vs {pack:?}");
        }
    }

    #[test]
    fn timeouts_default_and_clamp() {
        let t = |v: serde_json::Value| timeout_of(Some(&v), 1, 120);
        assert_eq!(timeout_of(None, 1, 120), 30);
        assert_eq!(t(json!(5)), 5);
        assert_eq!(t(json!(0)), 30);
        assert_eq!(t(json!(-3)), 30);
        assert_eq!(t(json!(500)), 120);
        assert_eq!(t(json!("7")), 7);
        assert_eq!(t(json!(null)), 30);
        assert_eq!(t(json!(2.5)), 2);
        assert_eq!(timeout_of(Some(&json!(500)), 1, 300), 300);
        assert_eq!(timeout_of(Some(&json!(1)), 5, 300), 5);
    }

    #[test]
    fn shell_and_argv_modes() {
        let request: ToolRequest =
            serde_json::from_value(json!({"command": "echo", "args": ["a b", "c"], "stdin": "ignored"})).unwrap();
        let job = job_of(&request, Path::new("/w"), &[], 1, 120).unwrap();
        assert_eq!(job.argv, ["bash", "-c", "echo a b c"]);
        assert_eq!(job.cwd, Path::new("/w"));
        assert_eq!(job.stdin, None);

        let request: ToolRequest = serde_json::from_value(
            json!({"command": "ignored", "argv": ["printf", "%s", "x\ny; rm -rf /"], "stdin": "in", "workDir": "/tmp"}),
        )
        .unwrap();
        let job = job_of(&request, Path::new("/w"), &[], 1, 120).unwrap();
        assert_eq!(job.argv, ["printf", "%s", "x\ny; rm -rf /"]);
        assert_eq!(job.stdin.as_deref(), Some(&b"in"[..]));
        assert_eq!(job.cwd, Path::new("/tmp"));

        let job = |request: serde_json::Value| {
            job_of(&serde_json::from_value(request).unwrap(), Path::new("/w"), &[], 1, 120).map(|_| ())
        };
        assert_eq!(job(json!({"argv": []})), Err(BadRequest::NothingToRun));
        assert_eq!(job(json!({"command": " \t"})), Err(BadRequest::NothingToRun));
        assert_eq!(job(json!({"argv": ["", "x"]})), Err(BadRequest::EmptyProgram));
        assert_eq!(job(json!({"argv": ["printf", "a\0b"]})), Err(BadRequest::NulByte));
        assert_eq!(
            BadRequest::NothingToRun.to_string(),
            "the request has neither a command nor an argv: nothing to run"
        );
    }

    #[test]
    fn start_failures_get_the_shells_codes_and_the_http_text() {
        let cases = [
            (StartError::NotFound { program: "x".into() }, 127, "x: not found (is it installed and on PATH?)"),
            (StartError::PermissionDenied { program: "x".into() }, 126, "x: permission denied"),
            (
                StartError::WorkingDirectory { path: "/gone".into(), problem: DirProblem::DoesNotExist },
                1,
                "working directory /gone does not exist",
            ),
            (StartError::Other("x: boom".into()), 1, "x: boom"),
        ];
        for (err, code, text) in cases {
            let result = ToolResult::not_started("1", &err);
            let stderr = format!("exec-server: failed to start command: {text}\n");
            assert_eq!((result.exit_code, result.stderr), (code, stderr));
        }
    }

    #[test]
    fn results_are_cut_at_the_cap_with_a_marker() {
        assert_eq!(capped(b"abc", false), "abc");
        assert_eq!(capped(b"abc", true), "abc...(truncated)");
        let json = serde_json::to_string(&ToolResult::refused("1", 2, "bad")).unwrap();
        assert_eq!(json, r#"{"id":"1","exitCode":2,"stdout":"","stderr":"exec-server: bad\n","timedOut":false}"#);
    }
}
