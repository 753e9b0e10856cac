//! sidecar-exec: runs a command in a build sidecar over the build-sidecar contract's HTTP API, as if it ran here.
//! [`program`] is the program; its configuration mistakes are [`config_error`]'s. Its parts, one folder per concern,
//! each using only the folders listed before it:
//!
//! - [`config`]: BUILD_SIDECARS (`sidecars`, each `entry`, its `token`), the SIDECAR_* settings (`settings`, with the
//!   working directory of `cwd` and the variables sent by `crate::env_sent`) and how long the client waits on a
//!   silent sidecar (`patience`).
//! - [`wire`]: the HTTP client and its messages (`http`), the waits between retries (`backoff`), the request body held
//!   against the limit (`request`), what a reply's status and headers say (`reply_head`), a reply body read bounded
//!   (`body`), a blocking reply read in place (`reply_reader`, `json_string`), an event stream's lines (`sse`).
//! - `tty/`: at a terminal, the raw local terminal, the window size that follows SIGWINCH, the panic that restores.
//! - `stdin/`: which stdin is forwarded (`policy`), read whole into one request (`whole`), or streamed while the
//!   command runs (`source` reads it, `pump` sends it).
//! - `call/`: one forwarded call. `forward` sends it negotiated, streaming or blocking (or on a remote terminal),
//!   `stream` reads an event stream into `output`, `resume` follows a named run (named by `run_id`) across lost
//!   connections, `signals` delivers signals as sent, `reported_code` gives the exit code.
//! - `modes/`: the other modes: `runs` (`--runs`, `--attach`, cancelling), `status`, and `explain` (`--explain`,
//!   SIDECAR_VERBOSE's lines).
//!
//! Only what the binaries, the fuzz properties and the examples use is public.

pub(crate) mod call;
pub mod config;
pub mod config_error;
pub(crate) mod modes;
pub mod program;
pub(crate) mod stdin;
pub(crate) mod tty;
pub mod wire;
