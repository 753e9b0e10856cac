//! sidecar-exec's per-call settings, from its SIDECAR_* variables, parsed once with a message for every mistake.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::config_error::ConfigError;

/// The environment variables the client reads, for `--help` and error messages.
pub const VARIABLES: &[(&str, &str)] = &[
    ("BUILD_SIDECARS", "required: {\"<runtime>\": {\"internal_url\": \"http://builder-<runtime>:8080\"}, …}; an entry may add \"token\" or \"token_file\""),
    ("SIDECAR_TIMEOUT", "seconds the command may run (default 600); blocking calls give up 30 s after it"),
    ("SIDECAR_CWD", "working directory sent to the server (default: the current directory)"),
    ("SIDECAR_STREAM", "1: stream output as it is produced (server-sent events) instead of one reply at the end"),
    ("SIDECAR_ENV_PASSTHROUGH", "comma-separated names of variables forwarded to the command (nothing else is)"),
    ("SIDECAR_TOKEN", "bearer token for every sidecar (a per-runtime token in BUILD_SIDECARS wins)"),
    ("SIDECAR_TOKEN_FILE", "file holding the bearer token (for mounted secrets)"),
    ("TRACEPARENT", "W3C trace context sent as the traceparent header: the command gets it as TRACEPARENT"),
    ("SIDECAR_REQUEST_ID", "sent as X-Request-Id: the server's log lines of this call carry it"),
    ("SIDECAR_STDIN", "1: forward stdin even when it is a pipe or terminal (a regular file is always forwarded); at most 768 KiB"),
    ("SIDECAR_IDLE_TIMEOUT", "seconds the command may go without printing anything before it is stopped as timed out (124); default none"),
    ("SIDECAR_RESUME", "0: do not name runs, so a lost connection ends the command (default: named, resumed transparently)"),
    ("SIDECAR_VERBOSE", "1: one stderr line for each resume after a lost connection"),
];

/// Per-call settings from SIDECAR_* variables.
#[derive(Debug, Clone)]
pub struct CallSettings {
    pub timeout_secs: u64,
    pub cwd: String,
    /// Whether `cwd` came from SIDECAR_CWD (else from the current directory): the fix for a refused cwd differs.
    pub cwd_from_env: bool,
    pub stream: bool,
    pub env: BTreeMap<String, String>,
    pub forward_stdin_pipe: bool,
    /// `traceparent` and `X-Request-Id` from TRACEPARENT and SIDECAR_REQUEST_ID, when set: the server checks them
    /// (and replaces or ignores what it does not accept), so they are sent as they are.
    pub trace_headers: Vec<(&'static str, String)>,
    /// SIDECAR_IDLE_TIMEOUT: seconds without output after which the server stops the command; none when unset or 0.
    pub idle_timeout_secs: Option<u64>,
    /// Whether runs are named and resumed (everything but SIDECAR_RESUME=0; see [`crate::sidecar::resume`]).
    pub resume: bool,
    /// SIDECAR_VERBOSE=1: a line on stderr for each resume.
    pub verbose: bool,
}

impl CallSettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        let timeout_secs = seconds("SIDECAR_TIMEOUT")?.unwrap_or(protocol::DEFAULT_TIMEOUT_SECS);
        let idle_timeout_secs = seconds("SIDECAR_IDLE_TIMEOUT")?.filter(|&secs| secs > 0);
        let from_env = std::env::var_os("SIDECAR_CWD").filter(|c| !c.is_empty());
        let cwd_from_env = from_env.is_some();
        let cwd = match from_env {
            Some(cwd) => PathBuf::from(cwd),
            None => std::env::current_dir()
                .map_err(|err| ConfigError(format!("cannot read the current directory ({err}): set SIDECAR_CWD")))?,
        };
        let cwd = cwd
            .into_os_string()
            .into_string()
            .map_err(|cwd| ConfigError(format!("the working directory {cwd:?} is not valid UTF-8: set SIDECAR_CWD")))?;
        let mut env = BTreeMap::new();
        for name in std::env::var("SIDECAR_ENV_PASSTHROUGH").unwrap_or_default().split(',') {
            let name = name.trim();
            if name.is_empty() {
                continue;
            }
            match std::env::var(name) {
                Ok(value) => {
                    env.insert(name.to_owned(), value);
                }
                Err(std::env::VarError::NotPresent) => {}
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(ConfigError(format!(
                        "{name} (listed in SIDECAR_ENV_PASSTHROUGH) is not valid UTF-8 and cannot be forwarded"
                    )))
                }
            }
        }
        Ok(CallSettings {
            timeout_secs,
            cwd,
            cwd_from_env,
            stream: flag("SIDECAR_STREAM"),
            env,
            forward_stdin_pipe: flag("SIDECAR_STDIN"),
            trace_headers: trace_headers(),
            idle_timeout_secs,
            resume: !matches!(
                std::env::var("SIDECAR_RESUME").as_deref().map(str::trim),
                Ok("0" | "false" | "no" | "off")
            ),
            verbose: flag("SIDECAR_VERBOSE"),
        })
    }

    /// How long a blocking call waits for its reply: the command's own timeout plus 30 s (the contract's rule).
    pub fn blocking_deadline(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.saturating_add(30))
    }
}

/// A whole number of seconds from `name`; `None` when unset or blank.
fn seconds(name: &str) -> Result<Option<u64>, ConfigError> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(text) if text.trim().is_empty() => Ok(None),
        Ok(text) => text
            .trim()
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ConfigError(format!("{name} must be a whole number of seconds, got {text:?}"))),
    }
}

fn trace_headers() -> Vec<(&'static str, String)> {
    [("traceparent", "TRACEPARENT"), ("x-request-id", "SIDECAR_REQUEST_ID")]
        .into_iter()
        .filter_map(|(header, variable)| {
            let value = std::env::var(variable).ok()?;
            (!value.trim().is_empty()).then(|| (header, value.trim().to_owned()))
        })
        .collect()
}

fn flag(name: &str) -> bool {
    matches!(std::env::var(name).as_deref().map(str::trim), Ok("1" | "true" | "yes" | "on"))
}
