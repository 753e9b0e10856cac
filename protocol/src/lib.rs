//! The wire contract shared by `exec-server` and `sidecar-exec`: the exec request and reply, the stream frames with
//! their encoder, the health/info bodies, the one runtime → commands table, how the bearer token is read, and the
//! contract's variable names. What only one side does with the wire stays on that side (the client's readers of a
//! reply and of an event stream are sidecar-exec's `sidecar::reply_reader` and `sidecar::sse`); shell quoting is here
//! until sidecarctl, which writes command lines with it, can import it from elsewhere (issue 26).
//!
//! Everything here is a compatible superset of the build-sidecar HTTP contract: fields that older peers do not know
//! are optional on the way in and additive on the way out.

pub mod codes;
pub mod exec;
pub mod frames;
pub mod json;
pub mod reply_text;
pub mod runs;
pub mod runtimes;
pub mod shell;
pub mod stdin;
pub mod terminal;
pub mod terminal_modes;
pub mod text;
pub mod token;
pub mod vars;

pub use codes::{ErrorCode, StartErrorKind, StoppedBy};
pub use exec::{
    DaemonsRequest, ErrorBody, ExecReply, ExecRequest, Health, Info, ReplyPart, B64_ONLY_HEADER, OUTPUT_HEAD_HEADER,
    RUN_KEPT_HEADER, STDIN_STREAM_HEADER, STREAM_ACCEPT,
};
pub use frames::{Chunk, Frame, FrameEncoder, StreamKind};
pub use runs::{RunId, RunIdError, RunInfo, RunList, RunState, SignalRequest};
pub use runtimes::{commands_for, RUNTIMES};
pub use stdin::StdinReply;
pub use terminal::{ResizeRequest, TtyRequest, TTY_HEADER};
pub use terminal_modes::TerminalModes;

/// Upper bound for a request body, in bytes (the contract's 1 MiB).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Timeout used when a request gives none, or gives zero or less (the contract's rule).
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// The hard ceiling on a command's timeout; a server may be configured lower, never higher.
pub const MAX_TIMEOUT_SECS: u64 = 3600;
/// Exit code reported for a command that ran out of time (as coreutils `timeout` does).
pub const EXIT_TIMED_OUT: i32 = 124;
/// Exit code reported for a command that never started (the contract's value).
pub const EXIT_NOT_STARTED: i32 = -1;
