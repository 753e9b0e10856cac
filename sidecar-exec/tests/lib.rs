//! sidecar-exec integration tests: the real client binary against the real exec-server on 127.0.0.1:0, and the
//! real ssh-exec binary against a real sshd on 127.0.0.1 (see `sshd.rs`).

mod compat;
mod differential;
mod forwarding;
mod hostile;
mod raw_server;
mod resume;
mod resume_scripted;
mod server_process;
mod signals;
mod silent;
mod ssh_exec;
mod ssh_stop;
mod ssh_wrappers;
mod sshd;
mod streamed;
mod support;
mod tty;
mod wrappers;
