//! sidecar-exec integration tests: the real client binary against the real exec-server on 127.0.0.1:0.

mod compat;
mod forwarding;
mod hostile;
mod raw_server;
mod signals;
mod support;
mod wrappers;
