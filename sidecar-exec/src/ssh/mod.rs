//! ssh-exec: runs a command on a host over the system's OpenSSH client, in the host folder that corresponds to the
//! current directory, with the command's output and exit code as if it ran here. [`program`] is the program;
//! [`script`] says what runs on the host and how it reports back.

pub mod auto;
pub mod command;
pub mod config_error;
pub mod key;
pub mod markers;
pub mod mux;
pub mod paths;
pub mod program;
pub mod script;
pub mod session;
pub mod settings;
pub mod terminal;
pub mod transport;
