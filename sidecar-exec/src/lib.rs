//! The agent-side clients and what they share.
//!
//! Two binaries live here: `sidecar-exec` forwards a command to a build sidecar over HTTP, `ssh-exec` runs it on a
//! host over OpenSSH. They share the exit contract ([`exit_code`], [`interrupt`]), the argv handling ([`argv`]),
//! the stdin policy ([`stdin`]) and the wrapper installer ([`wrappers`]), which picks one backend per command:
//! native > sidecar > SSH. sidecar-exec names its runs and resumes them across lost connections ([`resume`]).

pub mod argv;
pub mod body;
pub mod config;
pub mod exit_code;
pub mod forward;
pub mod http;
pub mod interrupt;
pub mod output;
pub mod request;
pub mod resume;
pub mod run_id;
pub mod runs;
pub mod shown;
pub mod ssh;
pub mod status;
pub mod stdin;
pub mod stream;
pub mod token;
pub mod wrappers;
