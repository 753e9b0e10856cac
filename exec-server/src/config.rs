//! Command-line flags and their environment twins. Doc comments here are the `--help` text.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use protocol::vars;

/// Runs commands for sidecar-exec clients: a small HTTP server for builder containers.
///
/// Every command runs in its own process group with a timeout that ends the whole tree, output is bounded, and an
/// optional bearer token (EXEC_SERVER_TOKEN or --token-file) guards every endpoint but /health. Single-dash long
/// flags (`-port 8080 -cwd /workspace`, `-healthcheck`) are accepted as orchestrators pass them. No EXEC_SERVER_*
/// variable is ever passed on to a command.
#[derive(Debug, Clone, Parser)]
#[command(version, about, long_about)]
pub struct Config {
    /// TCP port for the HTTP API [default: 8080]. With --ipc-dir, HTTP is served only when a port is given.
    #[arg(long, env = vars::EXEC_SERVER_PORT)]
    pub port: Option<u16>,

    /// Address to listen on. A builder is reached over a private network, so the default is every interface.
    #[arg(long, env = "EXEC_SERVER_HOST", default_value = "0.0.0.0")]
    pub host: String,

    /// Workspace root: relative request cwds resolve against it, and a cwd outside it is refused.
    #[arg(long, env = vars::EXEC_SERVER_CWD, default_value = "/workspace")]
    pub cwd: PathBuf,

    /// Runtime name reported by /info (node, python, java, go, rust, …).
    #[arg(long, env = vars::EXEC_SERVER_RUNTIME, default_value = "unknown")]
    pub runtime: String,

    /// Read the bearer token from this file (for mounted secrets; surrounding whitespace is ignored).
    /// EXEC_SERVER_TOKEN sets the token directly; it has no flag so the token never shows in `ps`.
    #[arg(long, env = vars::EXEC_SERVER_TOKEN_FILE, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// Probe a running server: GET http://127.0.0.1:PORT/health with a 3 s timeout; exit 0 on 200, else 1. PORT is
    /// this probe's own --port when given, else the one in --port-file, else EXEC_SERVER_PORT or 8080.
    #[arg(long)]
    pub healthcheck: bool,

    /// Write the port the server listens on to FILE (removed on a clean exit), so -healthcheck finds a port given
    /// only on the server's command line. The builder images set /tmp/exec-server.port.
    #[arg(long, env = "EXEC_SERVER_PORT_FILE", value_name = "FILE")]
    pub port_file: Option<PathBuf>,

    /// Commands that may run at once (a POST /exec reply still being sent counts as its command); more get 503
    /// with Retry-After.
    #[arg(long, env = "EXEC_SERVER_MAX_CONCURRENT", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent: u32,

    /// Seconds between SIGTERM and SIGKILL when a command is stopped (timeout, client gone, shutdown).
    #[arg(long, env = "EXEC_SERVER_GRACE", default_value = "5", value_parser = parse_seconds, value_name = "SECONDS")]
    pub grace: Duration,

    /// Seconds to keep reading output that a background descendant still writes after the command itself exited.
    #[arg(long, env = "EXEC_SERVER_DRAIN", default_value = "0.25", value_parser = parse_seconds, value_name = "SECONDS")]
    pub drain: Duration,

    /// Largest timeout granted, in seconds (at most 3600); larger requests are cut to it.
    #[arg(long, env = "EXEC_SERVER_MAX_TIMEOUT", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub max_timeout: u64,

    /// Bytes each of stdout and stderr may take in a POST /exec reply, counted as sent: escaped, plus base64 when
    /// not UTF-8 (a control byte costs 6, an invalid one about 4.3); the rest is read and dropped
    /// (`output_truncated`). Bounds a reply's size and memory whatever the command prints.
    #[arg(long, env = "EXEC_SERVER_MAX_OUTPUT", default_value_t = 16 * 1024 * 1024, value_name = "BYTES")]
    pub max_output: usize,

    /// Allow request cwds outside the workspace root.
    #[arg(long, env = "EXEC_SERVER_ALLOW_ANY_CWD")]
    pub allow_any_cwd: bool,

    /// Seconds between SSE keep-alive comments on /exec/stream (clients time out reads after 60 s).
    #[arg(long, env = "EXEC_SERVER_KEEPALIVE", default_value = "15", value_parser = parse_seconds, value_name = "SECONDS")]
    pub keepalive: Duration,

    /// Seconds a client has to send a request head (request line and headers), from its first byte (for a
    /// connection's first request, from when it opened), and again to send the body; slower clients get 408 and
    /// the connection closes. 0: no limit.
    #[arg(long, env = "EXEC_SERVER_HEADER_TIMEOUT", default_value = "10", value_parser = parse_seconds, value_name = "SECONDS")]
    pub header_timeout: Duration,

    /// Seconds a keep-alive connection may stay unused between requests before it is closed. A connection with a
    /// request in flight (a command running, a stream, a reply still being sent) is never idle. 0: no limit.
    #[arg(long, env = "EXEC_SERVER_IDLE_TIMEOUT", default_value = "60", value_parser = parse_seconds, value_name = "SECONDS")]
    pub idle_timeout: Duration,

    /// Open HTTP connections at most [default: 1024, or fewer when the open-file limit leaves less after keeping 8
    /// descriptors per command that may run]. At the cap a new connection closes the one unused longest; when every
    /// connection has a request in flight, it gets 503 with Retry-After.
    #[arg(long, env = "EXEC_SERVER_MAX_CONNECTIONS", value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub max_connections: Option<u32>,

    /// Also (or, without --port, instead of TCP) serve HTTP on a UNIX socket: `unix:/path/to.sock`. Repeatable; the
    /// variable takes a comma-separated list.
    #[arg(long, env = "EXEC_SERVER_LISTEN", value_name = "unix:PATH", value_delimiter = ',')]
    pub listen: Vec<String>,

    /// Permission bits of the UNIX sockets, in octal.
    #[arg(long, env = "EXEC_SERVER_SOCKET_MODE", default_value = "0660", value_parser = parse_mode, value_name = "OCTAL")]
    pub socket_mode: u32,

    /// Serve GET /metrics without the token (for a scraper that cannot send one); every other endpoint keeps it.
    #[arg(long, env = "EXEC_SERVER_METRICS_OPEN")]
    pub metrics_open: bool,

    /// Log level: error, warn, info (one line per command), debug.
    #[arg(long, env = "EXEC_SERVER_LOG", default_value = "info")]
    pub log: tracing::Level,

    /// Log lines as readable text, or as one JSON object per line (for log pipelines): the same events and fields.
    #[arg(long, env = "EXEC_SERVER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Also (or, without --port, only) serve the tool-sidecar file protocol in this folder, e.g. /ipc/tools.
    #[arg(long, env = "EXEC_SERVER_IPC_DIR", value_name = "DIR")]
    pub ipc_dir: Option<PathBuf>,

    /// The file whose appearance ends the run (and this server) [default: done beside the --ipc-dir folder].
    #[arg(long, env = "EXEC_SERVER_IPC_DONE", value_name = "FILE")]
    pub ipc_done: Option<PathBuf>,

    /// Smallest timeout a file-protocol request gets, in seconds.
    #[arg(long, env = "EXEC_SERVER_IPC_MIN_TIMEOUT", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub ipc_min_timeout: u64,

    /// Largest timeout a file-protocol request gets, in seconds (the protocol's 120; some deployments use 180 or 300).
    #[arg(long, env = "EXEC_SERVER_IPC_MAX_TIMEOUT", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub ipc_max_timeout: u64,

    /// File-protocol requests run at once; more wait, unclaimed, for a free slot.
    #[arg(long, env = "EXEC_SERVER_IPC_PARALLEL", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub ipc_parallel: u32,

    /// This executor's skill pack: file-protocol requests whose `target` names another one are left alone
    /// (compared lowercase with all whitespace removed; unset takes every request).
    #[arg(long, env = "SYMPOZIUM_SKILL_PACK", value_name = "NAME")]
    pub skill_pack: Option<String>,

    /// Seconds a named run (a request with `run_id`) keeps running after its last client went away, waiting for
    /// one to reattach; then it is stopped like any command whose client left (TERM, grace, KILL).
    #[arg(long, env = "EXEC_SERVER_REATTACH_WINDOW", default_value = "30", value_parser = parse_seconds, value_name = "SECONDS")]
    pub reattach_window: Duration,

    /// Seconds a named run's result and output are kept after it ended, for a client to fetch or replay.
    #[arg(long, env = "EXEC_SERVER_RETAIN", default_value = "300", value_parser = parse_seconds, value_name = "SECONDS")]
    pub retain: Duration,

    /// Named runs kept at most, running or ended: the oldest ended ones are forgotten first; a new named run when
    /// all are still running gets 503.
    #[arg(long, env = "EXEC_SERVER_MAX_RUNS", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub max_runs: u32,

    /// Bytes of named runs' output kept in memory, all runs together: a run's log stays in memory (as the chunks
    /// were read, never copied) while the total allows, and the stream that would pass it moves to a spill file in
    /// --state-dir. The default is the bound on memory that 256 KiB per stream of --max-runs runs used to give.
    #[arg(long, env = "EXEC_SERVER_RUN_MEMORY", default_value_t = 128 * 1024 * 1024, value_name = "BYTES")]
    pub run_memory: u64,

    /// Folder for named runs' output beyond what is kept in memory (--run-memory) [default: a fresh
    /// exec-server-PID-RANDOM folder in the system temp dir, mode 0700, removed at exit].
    #[arg(long, env = "EXEC_SERVER_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Bytes of each stream a named run keeps at most: beyond, the first half and the last half are kept and the
    /// middle is counted as dropped (announced to readers by a `dropped` frame). Never less than --max-output, so
    /// a named run's /exec reply keeps all that an unnamed one would.
    #[arg(long, env = "EXEC_SERVER_RUN_LOG_MAX", default_value_t = 64 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(2..), value_name = "BYTES")]
    pub run_log_max: u64,

    /// What becomes of a daemon a command leaves behind (a session of its own that listens on a socket and holds none
    /// of the command's pipes, left by a command that ended by itself): `keep` it, as a native build leaves its
    /// Gradle or Bazel server running for the next build, or `end` it with the command like any escapee. Use `end`
    /// on a builder shared between tokens or teams: a daemon keeps the environment of the request that started it.
    #[arg(long, env = "EXEC_SERVER_DAEMONS", value_enum, default_value_t = Daemons::Keep)]
    pub daemons: Daemons,

    /// Kept daemons at most; keeping one more ends the oldest (TERM, grace, KILL).
    #[arg(long, env = "EXEC_SERVER_MAX_DAEMONS", default_value_t = 8, value_name = "N")]
    pub max_daemons: u32,

    /// Seconds without any command running after which every kept daemon is ended (the tools' own idle limits are
    /// 3 h). 0: never.
    #[arg(long, env = "EXEC_SERVER_DAEMON_IDLE", default_value = "10800", value_parser = parse_seconds, value_name = "SECONDS")]
    pub daemon_idle: Duration,

    /// The bearer token itself (from EXEC_SERVER_TOKEN; see --token-file).
    #[arg(skip)]
    pub token: Option<String>,
}

/// `--daemons`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Daemons {
    Keep,
    End,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Rewrites `-port 8080` and `-port=8080` to `--port …` for every known long flag; leaves everything else alone.
pub fn normalize_single_dash<I: IntoIterator<Item = std::ffi::OsString>>(args: I) -> Vec<std::ffi::OsString> {
    // The long flags come from the parser itself, so a new flag gets its single-dash form for free.
    let command = <Config as clap::CommandFactory>::command();
    let long_flags: Vec<&str> =
        command.get_arguments().filter_map(clap::Arg::get_long).chain(["help", "version"]).collect();
    args.into_iter()
        .map(|arg| {
            let Some(text) = arg.to_str() else { return arg };
            let Some(rest) = text.strip_prefix('-').filter(|r| !r.starts_with('-')) else { return arg };
            let name = rest.split('=').next().unwrap_or_default();
            if long_flags.contains(&name) {
                format!("-{text}").into()
            } else {
                arg
            }
        })
        .collect()
}

/// `--socket-mode` that is not permission bits in octal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAMode(pub String);

impl std::fmt::Display for NotAMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} is not a permission mode in octal (e.g. 0660)", self.0)
    }
}

impl std::error::Error for NotAMode {}

fn parse_mode(text: &str) -> Result<u32, NotAMode> {
    u32::from_str_radix(text.trim(), 8).ok().filter(|mode| *mode <= 0o777).ok_or_else(|| NotAMode(text.to_owned()))
}

/// Seconds, up to a day ([`process_group::parse_seconds`]).
fn parse_seconds(text: &str) -> Result<Duration, process_group::SecondsError> {
    process_group::parse_seconds(text, 86_400)
}

/// The HTTP port when none is given.
pub const DEFAULT_PORT: u16 = 8080;

impl Config {
    /// The most commands that may run at once: HTTP (`--max-concurrent`) and, with `--ipc-dir`, file protocol.
    pub fn max_commands(&self) -> usize {
        self.max_concurrent as usize + if self.ipc_dir.is_some() { self.ipc_parallel as usize } else { 0 }
    }

    /// Whether to serve HTTP over TCP: without --ipc-dir and --listen (the contract's server), and with either only
    /// when a port was asked for, so a tool sidecar or a socket-only builder opens no port it does not need.
    pub fn serves_http(&self) -> bool {
        (self.ipc_dir.is_none() && self.listen.is_empty()) || self.port.is_some()
    }

    /// The daemon policy of `--daemons`, `--max-daemons` and `--daemon-idle`.
    pub fn daemon_policy(&self) -> crate::engine::daemons::DaemonPolicy {
        crate::engine::daemons::DaemonPolicy {
            keep: self.daemons == Daemons::Keep && self.max_daemons > 0,
            max: self.max_daemons as usize,
            idle: (!self.daemon_idle.is_zero()).then_some(self.daemon_idle),
        }
    }

    /// The --ipc-done file: as given, or `done` beside the IPC folder (`/ipc/tools` → `/ipc/done`).
    pub fn ipc_done_path(&self) -> Option<PathBuf> {
        let dir = self.ipc_dir.as_ref()?;
        Some(self.ipc_done.clone().unwrap_or_else(|| match dir.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.join("done"),
            _ => PathBuf::from("done"),
        }))
    }

    /// The token in force: EXEC_SERVER_TOKEN (already taken into `token`, see [`crate::token::take_from_env`]) or
    /// the token file, both trimmed the same way.
    pub fn resolve_token(&self) -> Result<Option<String>, crate::token::TokenError> {
        if let Some(token) = self.token.as_deref().and_then(crate::token::normalize) {
            return Ok(Some(token.to_owned()));
        }
        match &self.token_file {
            Some(path) => crate::token::read_file(path).map(Some),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Config {
        Config::try_parse_from(normalize_single_dash(args.iter().map(Into::into))).unwrap()
    }

    #[test]
    fn single_dash_long_flags_work() {
        let config =
            parse(&["exec-server", "-port", "9000", "-cwd=/w", "-grace", "0.5", "-allow-any-cwd", "-skill-pack", "x"]);
        assert_eq!(config.port, Some(9000));
        assert_eq!(config.cwd, PathBuf::from("/w"));
        assert_eq!(config.grace, Duration::from_millis(500));
        assert!(config.allow_any_cwd);
        assert_eq!(config.skill_pack.as_deref(), Some("x"));
        assert!(parse(&["exec-server", "-healthcheck"]).healthcheck);
    }

    #[test]
    fn unknown_single_dash_words_are_left_for_clap_to_refuse() {
        assert_eq!(normalize_single_dash(["-x".into(), "-portx".into()]), ["-x", "-portx"]);
        assert!(Config::try_parse_from(["exec-server", "--max-timeout", "7200"]).is_err());
        assert!(Config::try_parse_from(["exec-server", "--grace", "soon"]).is_err());
        assert_eq!(parse_mode("0755"), Ok(0o755));
        assert_eq!(parse_mode("999"), Err(NotAMode("999".into())));
    }
}
