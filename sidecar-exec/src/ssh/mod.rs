//! ssh-exec: runs a command on a host over the system's OpenSSH client, in the host folder that corresponds to the
//! current directory, with the command's output and exit code as if it ran here. [`program`] is the program;
//! `script` says what runs on the host and how it reports back.

pub(crate) mod auto;
pub(crate) mod command;
pub(crate) mod config_error;
pub(crate) mod key;
pub(crate) mod markers;
pub(crate) mod mux;
pub(crate) mod paths;
pub mod program;
pub(crate) mod script;
pub(crate) mod session;
pub(crate) mod settings;
pub(crate) mod transport;
