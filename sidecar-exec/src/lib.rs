//! The agent-side clients and what they share.
//!
//! `sidecar-exec` forwards a command to a build sidecar over HTTP. The exit contract ([`exit_code`],
//! [`interrupt`]), the argv handling ([`argv`]), the stdin policy ([`stdin`]) and the wrapper installer
//! ([`wrappers`]) are kept apart from HTTP, for a second backend to share.

pub mod argv;
pub mod body;
pub mod config;
pub mod exit_code;
pub mod forward;
pub mod http;
pub mod interrupt;
pub mod request;
pub mod shell;
pub mod shown;
pub mod status;
pub mod stdin;
pub mod token;
pub mod wrappers;
