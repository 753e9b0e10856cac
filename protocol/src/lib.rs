//! The wire contract shared by `exec-server` and `sidecar-exec`, one module per part of it:
//!
//! - the bodies: [`exec`] (the `/exec` request and reply, `/health`, `/info`, every error body and the extension
//!   headers), [`frames`] (the stream's frames and the encoder that batches pipe bytes into them), [`runs`] (named
//!   runs: the run id and the `/runs` bodies), [`stdin`] (streamed stdin's reply), [`terminal`] (a TTY run's request,
//!   resize body and header), [`codes`] (the machine-readable `code`s and `stopped_by` clients decide by);
//! - how bytes travel in them: [`text`] (UTF-8 as text, anything else with an exact base64 twin), [`reply_text`]
//!   (that text escaped for a reply) and [`json`] (the hand-written JSON writer, kept on its A/B);
//! - what both ends read alike: [`runtimes`] (the one runtime → commands table), [`token`] (how the bearer token is
//!   trimmed and read), [`vars`] (the contract's variable names), [`random_id`] (the ids the clients and sidecarctl
//!   make up).
//!
//! What only one side does with the wire stays on that side (the client's readers of a reply and of an event stream
//! are sidecar-exec's `sidecar::reply_reader` and `sidecar::sse`). [`shell`] (POSIX quoting) is the one part that is
//! no wire matter: it is here because the clients and sidecarctl, which writes command lines with it, share no other
//! crate.
//!
//! Everything here is a compatible superset of the build-sidecar HTTP contract: fields that older peers do not know
//! are optional on the way in and additive on the way out.

pub mod codes;
pub mod exec;
pub mod frames;
pub mod json;
mod objects;
pub mod random_id;
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
    DaemonsRequest, ErrorBody, ExecReply, ExecRequest, Health, Info, ReplyPart, B64_ONLY_HEADER, BOOT_ID_HEADER,
    OUTPUT_HEAD_HEADER, RUN_KEPT_HEADER, STDIN_STREAM_HEADER, STREAM_ACCEPT,
};
pub use frames::{Chunk, Frame, FrameEncoder, StreamKind};
pub use random_id::random_hex;
pub use runs::{RunId, RunIdError, RunInfo, RunList, RunState, SignalRequest};
pub use runtimes::{commands_for, RUNTIMES};
pub use stdin::StdinReply;
pub use terminal::{ResizeRequest, TtyRequest, TTY_HEADER};
pub use terminal_modes::TerminalModes;

/// Upper bound for a request body, in bytes (the contract's 1 MiB).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// The most variables a request's `env` may name. A real environment holds tens to a few hundred (a Kubernetes pod
/// with service links: 7 a service); this is ten times a large one, and keeps a request that fills its 1 MiB with
/// empty variables (80 000 of them) from costing the server more than its parse.
pub const MAX_ENV_VARS: usize = 4096;
/// Timeout used when a request gives none, or gives zero or less (the contract's rule).
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// The hard ceiling on a command's timeout; a server may be configured lower, never higher.
pub const MAX_TIMEOUT_SECS: u64 = 3600;
/// Exit code reported for a command that ran out of time (as coreutils `timeout` does).
pub const EXIT_TIMED_OUT: i32 = 124;
/// Exit code reported for a command that never started (the contract's value).
pub const EXIT_NOT_STARTED: i32 = -1;
