//! What the server counts, for `GET /metrics`: commands by how they ended, their durations, what is running, output
//! bytes, HTTP requests by endpoint and status, escaped descendants ended, daemons kept and ended, held stdin
//! requests, and file-protocol requests by outcome.
//!
//! The metrics live in one [`Metrics`] per server (no global registry: tests run several servers in one process, and
//! each must count only its own traffic). The server makes it and hands each part only its own handle: the engine
//! [`CommandMetrics`], HTTP [`HttpMetrics`] (and the whole, which it serves), the file protocol [`IpcMetrics`]. Exposition is the `prometheus-client` crate's OpenMetrics text, which
//! Prometheus scrapes as is. Every label value is one of a fixed few (endpoints are mapped to the known routes), so
//! nothing a client sends can grow the series.

use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// How a command requested of the engine ended: the `outcome` label of `exec_server_commands_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandOutcome {
    /// Exited by itself with status 0.
    Success,
    /// Exited by itself with a non-zero status.
    Failure,
    /// Ended by a signal it was not sent by us (the OOM killer, its own `kill`).
    Signal,
    TimedOut,
    /// Stopped because its transport or a shutdown asked.
    Cancelled,
    /// Never ran: no such program, no working directory, …
    NotStarted,
}

impl CommandOutcome {
    const ALL: [CommandOutcome; 6] = [
        CommandOutcome::Success,
        CommandOutcome::Failure,
        CommandOutcome::Signal,
        CommandOutcome::TimedOut,
        CommandOutcome::Cancelled,
        CommandOutcome::NotStarted,
    ];

    fn label(self) -> &'static str {
        match self {
            CommandOutcome::Success => "exit_zero",
            CommandOutcome::Failure => "exit_nonzero",
            CommandOutcome::Signal => "signal",
            CommandOutcome::TimedOut => "timed_out",
            CommandOutcome::Cancelled => "cancelled",
            CommandOutcome::NotStarted => "not_started",
        }
    }
}

/// Why a kept daemon was ended: the `reason` label of `exec_server_daemons_ended_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonEnd {
    /// Keeping a newer one would have passed `--max-daemons`.
    MaxDaemons,
    /// No command ran for `--daemon-idle`.
    DaemonIdle,
    /// The server shut down.
    Shutdown,
}

impl DaemonEnd {
    const ALL: [DaemonEnd; 3] = [DaemonEnd::MaxDaemons, DaemonEnd::DaemonIdle, DaemonEnd::Shutdown];

    pub fn label(self) -> &'static str {
        match self {
            DaemonEnd::MaxDaemons => "max_daemons",
            DaemonEnd::DaemonIdle => "daemon_idle",
            DaemonEnd::Shutdown => "shutdown",
        }
    }
}

/// How the file protocol answered one request: the `outcome` label of `exec_server_ipc_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpcOutcome {
    /// Its command ran (whatever its exit code) and the result was written.
    Ran,
    /// Its command could not be started; the result says why.
    NotStarted,
    /// Refused without running anything: unreadable, not valid JSON, an invalid field.
    Refused,
    /// Another server claimed it first, or the run was ending.
    NotClaimed,
    /// The claim or the result file could not be written.
    IoError,
}

impl IpcOutcome {
    fn label(self) -> &'static str {
        match self {
            IpcOutcome::Ran => "ran",
            IpcOutcome::NotStarted => "not_started",
            IpcOutcome::Refused => "refused",
            IpcOutcome::NotClaimed => "not_claimed",
            IpcOutcome::IoError => "io_error",
        }
    }
}

type Labels = [(&'static str, &'static str); 1];
type RequestLabels = [(&'static str, String); 2];

/// The server's metrics: the registry the exposition reads, and the handles that count into it. Every update is an
/// atomic add, plus a read lock for a labelled family.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    commands: CommandMetrics,
    http: HttpMetrics,
    ipc: IpcMetrics,
}

/// What the engine counts: commands by how they ended, their durations, what is running, output bytes, escaped
/// descendants ended. Cheap to clone; every clone counts into the same series.
#[derive(Debug, Clone)]
pub struct CommandMetrics {
    outcomes: [Counter; 6],
    duration: Histogram,
    running: Gauge,
    stdout_bytes: Counter,
    stderr_bytes: Counter,
    escaped: Counter,
    daemons_kept: Gauge,
    daemons_ended: [Counter; 3],
}

/// What HTTP counts: requests by endpoint and status, and stdin requests held for a command to read. Cheap to clone.
#[derive(Debug, Clone)]
pub struct HttpMetrics {
    requests: Family<RequestLabels, Counter>,
    stdin_waiting: Gauge,
}

/// What the file protocol counts: requests by outcome. Cheap to clone.
#[derive(Debug, Clone)]
pub struct IpcMetrics {
    requests: Family<Labels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("exec_server");
        registry.register("build", "The exec-server build", Info::new([("version", env!("CARGO_PKG_VERSION"))]));
        let commands = Family::<Labels, Counter>::default();
        let outcomes = CommandOutcome::ALL.map(|outcome| commands.get_or_create_owned(&[("outcome", outcome.label())]));
        registry.register(
            "commands",
            "Commands requested of the engine (HTTP and file protocol), by how they ended; not_started never ran",
            commands,
        );
        // 5 ms to about 22 min, ×4 per bucket: short tool calls and long builds both land in a useful bucket.
        let duration = Histogram::new(exponential_buckets(0.005, 4.0, 10));
        registry.register(
            "command_duration_seconds",
            "From start until the command's leader ended (commands that started)",
            duration.clone(),
        );
        let running = Gauge::default();
        registry.register("commands_running", "Commands running now", running.clone());
        let output = Family::<Labels, Counter>::default();
        let stdout_bytes = output.get_or_create_owned(&[("stream", "stdout")]);
        let stderr_bytes = output.get_or_create_owned(&[("stream", "stderr")]);
        registry.register("output_bytes", "Bytes commands wrote, kept or not", output);
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered by the router, by endpoint and status",
            requests.clone(),
        );
        let stdin_waiting = Gauge::default();
        registry.register(
            "stdin_requests_waiting",
            "POST /runs/{id}/stdin requests held until their command has read enough of its stdin",
            stdin_waiting.clone(),
        );
        let escaped = Counter::default();
        registry.register(
            "escaped_processes_ended",
            "Descendants that left their command's process group, ended with their command",
            escaped.clone(),
        );
        let daemons_kept = Gauge::default();
        registry.register(
            "daemons_kept",
            "Sessions a command left behind that the server keeps as daemons",
            daemons_kept.clone(),
        );
        let ended = Family::<Labels, Counter>::default();
        let daemons_ended = DaemonEnd::ALL.map(|why| ended.get_or_create_owned(&[("reason", why.label())]));
        registry.register("daemons_ended", "Kept daemons the server ended, by why", ended);
        let ipc = Family::<Labels, Counter>::default();
        registry.register("ipc_requests", "File-protocol requests answered, by outcome", ipc.clone());
        Metrics {
            registry,
            commands: CommandMetrics {
                outcomes,
                duration,
                running,
                stdout_bytes,
                stderr_bytes,
                escaped,
                daemons_kept,
                daemons_ended,
            },
            http: HttpMetrics { requests, stdin_waiting },
            ipc: IpcMetrics { requests: ipc },
        }
    }
}

impl Metrics {
    pub fn commands(&self) -> &CommandMetrics {
        &self.commands
    }

    pub fn http(&self) -> &HttpMetrics {
        &self.http
    }

    pub fn ipc(&self) -> &IpcMetrics {
        &self.ipc
    }

    /// The OpenMetrics text exposition (which Prometheus reads).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

impl CommandMetrics {
    /// Counts one command as running until the guard is dropped.
    pub fn running(&self) -> RunningGuard {
        self.running.inc();
        RunningGuard(self.running.clone())
    }

    /// Records how a command ended; `ran` holds its duration and output sizes when it started.
    pub fn command_ended(&self, outcome: CommandOutcome, ran: Option<(Duration, u64, u64)>) {
        self.outcomes[outcome as usize].inc();
        if let Some((duration, stdout, stderr)) = ran {
            self.duration.observe(duration.as_secs_f64());
            self.stdout_bytes.inc_by(stdout);
            self.stderr_bytes.inc_by(stderr);
        }
    }

    pub fn escaped_ended(&self, count: usize) {
        self.escaped.inc_by(count as u64);
    }

    /// How many daemons are kept now.
    pub fn daemons_kept(&self, count: usize) {
        self.daemons_kept.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    pub fn daemons_ended(&self, why: DaemonEnd, count: usize) {
        self.daemons_ended[why as usize].inc_by(count as u64);
    }
}

impl HttpMetrics {
    /// One HTTP request answered: `endpoint` must be one of a fixed set (the caller maps unknown paths).
    pub fn request(&self, endpoint: &'static str, status: u16) {
        self.requests.get_or_create(&[("endpoint", endpoint.to_owned()), ("status", status.to_string())]).inc();
    }

    /// Counts one stdin request as held until the guard is dropped.
    pub fn stdin_waiting(&self) -> RunningGuard {
        self.stdin_waiting.inc();
        RunningGuard(self.stdin_waiting.clone())
    }
}

impl IpcMetrics {
    pub fn request(&self, outcome: IpcOutcome) {
        self.requests.get_or_create(&[("outcome", outcome.label())]).inc();
    }
}

/// Decrements its gauge when dropped (the running commands', the held stdin requests'), also when a run or a
/// request is abandoned.
#[derive(Debug)]
pub struct RunningGuard(Gauge);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The content type of [`Metrics::encode`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_is_exposed_from_the_start() {
        let metrics = Metrics::default();
        metrics.commands().command_ended(CommandOutcome::Failure, Some((Duration::from_millis(3), 10, 2)));
        let text = metrics.encode();
        for outcome in CommandOutcome::ALL {
            assert!(text.contains(&format!("exec_server_commands_total{{outcome=\"{}\"}}", outcome.label())));
        }
        assert!(text.contains("exec_server_commands_total{outcome=\"exit_nonzero\"} 1\n"), "{text}");
        assert!(text.contains("exec_server_output_bytes_total{stream=\"stdout\"} 10\n"), "{text}");
        assert!(text.contains("exec_server_build_info{version=\""), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }
}
