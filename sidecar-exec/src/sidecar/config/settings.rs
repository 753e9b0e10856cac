//! sidecar-exec's per-call settings, from its SIDECAR_* variables, parsed once with a message for every mistake.

use std::collections::BTreeMap;
use std::time::Duration;

use protocol::vars;

use crate::config_error::ConfigError;
use crate::env::{self, Entry, Resolution};
use crate::env_sent::{self, Allowlist};
use crate::sidecar::config::cwd::{self, Cwd, SentCwdError};
pub use crate::sidecar::config::patience::Patience;

/// sidecar-exec's allowlist: the contract's SIDECAR_ENV_PASSTHROUGH (any name: the HTTP API sets it as it is).
const ALLOWLIST: Allowlist = Allowlist {
    list: vars::SIDECAR_ENV_PASSTHROUGH,
    defaults_switch: "SIDECAR_ENV_DEFAULTS",
    entry: Entry::AnyVariable,
};

/// The environment variables the client reads, for `--help` and error messages.
pub const VARIABLES: &[(&str, &str)] = &[
    (vars::BUILD_SIDECARS, "required: {\"<runtime>\": {\"internal_url\": \"http://builder-<runtime>:8080\"}, …}; an entry may add \"token\" or \"token_file\""),
    ("SIDECAR_TIMEOUT", "seconds the command may run (default 600); blocking calls give up 30 s after it"),
    ("SIDECAR_CWD", "working directory sent to the server (default: the current directory)"),
    ("SIDECAR_STREAM", "unset: stream when the sidecar can (asked in the same request), else one reply at the end; 1: always stream (POST /exec/stream); 0: always one reply at the end (the old blocking call)"),
    (vars::SIDECAR_ENV_PASSTHROUGH, "names of variables forwarded to the command, separated by commas or spaces; a trailing * is a pattern (NPM_CONFIG_*)"),
    ("SIDECAR_ENV_DEFAULTS", "0: do not send the default allowlist (TERM COLORTERM LANG LANGUAGE LC_* TZ NO_COLOR FORCE_COLOR CLICOLOR CLICOLOR_FORCE CI)"),
    (vars::SIDECAR_TOKEN, "bearer token for every sidecar (a per-runtime token in BUILD_SIDECARS wins)"),
    (vars::SIDECAR_TOKEN_FILE, "file holding the bearer token (for mounted secrets)"),
    ("TRACEPARENT", "W3C trace context sent as the traceparent header: the command gets it as TRACEPARENT"),
    ("SIDECAR_REQUEST_ID", "sent as X-Request-Id: the server's log lines of this call carry it"),
    ("SIDECAR_STDIN", "0: forward no stdin (the command reads /dev/null); default: a pipe, file, heredoc or terminal is streamed to the command"),
    ("SIDECAR_IDLE_TIMEOUT", "seconds the command may go without printing anything before it is stopped as timed out (124); default none"),
    ("SIDECAR_TTY", "unset: run on a remote terminal (raw keys, resize) when stdin and stdout are terminals; 1: always; 0: never (the pipe behaviour)"),
    ("SIDECAR_SILENCE", "seconds an event stream may go without a byte, keep-alives included, before the client counts its connection lost (default 60, four of exec-server's keep-alive intervals; keep it above the server's --keepalive, 15 s by default, or a quiet command counts as lost); reconnecting then gives up after as long again, and every follow-up request (reconnect, stdin, signal, resize, cancel) waits at most 10 s for its answer, or this long when shorter"),
    ("SIDECAR_RESUME", "0: do not name runs, so a lost connection ends the command (default: named, resumed transparently)"),
    ("SIDECAR_VERBOSE", "1: what is sent (target, mode, variable names) before the call, and one stderr line for each resume"),
];

/// Per-call settings from SIDECAR_* variables.
#[derive(Debug, Clone)]
pub struct CallSettings {
    pub timeout_secs: u64,
    pub cwd: String,
    /// Whether `cwd` came from SIDECAR_CWD (else from the current directory): the fix for a refused cwd differs.
    pub cwd_from_env: bool,
    /// SIDECAR_STREAM: how the output comes back.
    pub mode: OutputMode,
    pub env: BTreeMap<String, String>,
    /// Which of `env`'s names came from the default allowlist (their values may be shown; see [`env_sent`]).
    pub env_defaults: Vec<String>,
    /// SIDECAR_STDIN: `Some(false)` for 0 (forward nothing), `Some(true)` for 1, `None` unset (the default:
    /// stream it in the streaming modes, the old policy in the blocking one).
    pub stdin_switch: Option<bool>,
    /// SIDECAR_TTY: `Some` forces TTY mode on or off; `None` (unset) decides by whether stdin and stdout are
    /// terminals (see [`crate::at_a_terminal::wanted`]).
    pub tty_switch: Option<bool>,
    /// `traceparent` and `X-Request-Id` from TRACEPARENT and SIDECAR_REQUEST_ID, when set: the server checks them
    /// (and replaces or ignores what it does not accept), so they are sent as they are.
    pub trace_headers: Vec<(&'static str, String)>,
    /// SIDECAR_IDLE_TIMEOUT: seconds without output after which the server stops the command; none when unset or 0.
    pub idle_timeout_secs: Option<u64>,
    /// Whether runs are named and resumed (everything but SIDECAR_RESUME=0; see [`crate::sidecar::call::resume`]).
    pub resume: bool,
    /// SIDECAR_VERBOSE=1: a line on stderr for each resume.
    pub verbose: bool,
    /// SIDECAR_SILENCE: how long a server may say nothing before the client stops waiting on it.
    pub patience: Patience,
}

impl CallSettings {
    /// The variables' mistakes, and the working directory's (the program's own kind of mistake).
    pub fn from_env() -> Result<Self, ConfigError<SentCwdError>> {
        let timeout = env::seconds("SIDECAR_TIMEOUT", Resolution::WholeSeconds, 0, None)?;
        let idle_timeout = env::seconds("SIDECAR_IDLE_TIMEOUT", Resolution::WholeSeconds, 0, None)?;
        let silence = env::seconds("SIDECAR_SILENCE", Resolution::WholeSeconds, 1, None)?;
        let Cwd { path: cwd, from_env: cwd_from_env } = cwd::from_env().map_err(ConfigError::Program)?;
        let sent = env_sent::from_env(ALLOWLIST)?;
        Ok(CallSettings {
            timeout_secs: timeout.map_or(protocol::DEFAULT_TIMEOUT_SECS, |timeout| timeout.as_secs()),
            cwd,
            cwd_from_env,
            mode: OutputMode::from_env(),
            env: sent.values,
            env_defaults: sent.defaults,
            stdin_switch: switch("SIDECAR_STDIN"),
            tty_switch: switch("SIDECAR_TTY"),
            trace_headers: trace_headers(),
            idle_timeout_secs: idle_timeout.map(|idle| idle.as_secs()).filter(|&secs| secs > 0),
            resume: !env::switched_off("SIDECAR_RESUME"),
            verbose: env::switched_on("SIDECAR_VERBOSE"),
            patience: silence.map_or(Patience::DEFAULT, |silence| Patience { silence }),
        })
    }

    /// How long a blocking call waits for its reply: the command's own timeout plus 30 s (the contract's rule).
    pub fn blocking_deadline(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.saturating_add(30))
    }
}

/// How the reply comes back (SIDECAR_STREAM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// Unset, the default: `POST /exec` with [`protocol::STREAM_ACCEPT`]; a server that streams answers with its
    /// event stream, any other (the contract's) with its JSON reply, told apart by the reply's `content-type`.
    Negotiate,
    /// SIDECAR_STREAM=1: always `POST /exec/stream`.
    Stream,
    /// SIDECAR_STREAM=0: always the blocking `POST /exec`, exactly the contract's original blocking client (stdin inline, a
    /// signal cancels).
    Blocking,
}

impl OutputMode {
    fn from_env() -> Self {
        match switch("SIDECAR_STREAM") {
            None => OutputMode::Negotiate,
            Some(true) => OutputMode::Stream,
            Some(false) => OutputMode::Blocking,
        }
    }

    /// How `--explain` and SIDECAR_VERBOSE name it.
    pub fn describe(self) -> &'static str {
        match self {
            OutputMode::Negotiate => "stream when the sidecar can (negotiated on POST /exec)",
            OutputMode::Stream => "stream (SIDECAR_STREAM=1: POST /exec/stream)",
            OutputMode::Blocking => "blocking (SIDECAR_STREAM=0: one reply at the end)",
        }
    }
}

/// A switch read both ways: on, off, or unset (anything else counts as unset, as [`env::switched_on`] does).
fn switch(name: &str) -> Option<bool> {
    if env::switched_on(name) {
        Some(true)
    } else if env::switched_off(name) {
        Some(false)
    } else {
        None
    }
}

fn trace_headers() -> Vec<(&'static str, String)> {
    [("traceparent", "TRACEPARENT"), ("x-request-id", "SIDECAR_REQUEST_ID")]
        .into_iter()
        .filter_map(|(header, variable)| env::text(variable).map(|value| (header, value)))
        .collect()
}
