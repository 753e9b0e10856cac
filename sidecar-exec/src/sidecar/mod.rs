//! sidecar-exec: runs a command in a build sidecar over the build-sidecar contract's HTTP API, as if it ran here.
//! [`program`] is the program. Its configuration: [`sidecars`] (BUILD_SIDECARS, each [`entry`]), [`token`],
//! [`settings`] (SIDECAR_*, with the working directory of [`cwd`] and the variables sent by [`crate::env_sent`]),
//! [`explain`]. A call: [`stdin_body`] and [`request`] build it, [`forward`] sends it negotiated, streaming or
//! blocking, [`stdin_source`] and [`stdin_pump`] stream stdin, [`signals`] delivers signals as sent, [`resume`]
//! follows a named run across lost connections into [`output`], [`reported_code`] gives the exit code; at a terminal,
//! [`forward`] runs it on a remote one with [`tty`]'s parts. On the wire: [`http`] (the client and its messages),
//! [`reply_head`] (what a reply's status and headers say), [`body`], [`reply_reader`]
//! and [`json_string`] (a blocking reply), [`sse`] and [`stream`] (an event stream). The other modes: [`runs`]
//! (`--runs`, `--attach`, cancelling), [`status`].

pub mod body;
pub mod config_error;
pub mod cwd;
pub mod entry;
pub mod explain;
pub mod forward;
pub mod http;
pub mod json_string;
pub mod output;
pub mod program;
pub mod reply_head;
pub mod reply_reader;
pub mod reported_code;
pub mod request;
pub mod resume;
pub mod run_id;
pub mod runs;
pub mod settings;
pub mod sidecars;
pub mod signals;
pub mod sse;
pub mod status;
pub mod stdin_body;
pub mod stdin_pump;
pub mod stdin_source;
pub mod stream;
pub mod token;
pub mod tty;
