//! The agent-side clients and what they share.
//!
//! Two programs live here, each in its own folder: `sidecar-exec` ([`sidecar`]) forwards a command to a build sidecar
//! over HTTP, `ssh-exec` ([`ssh`]) runs it on a host over OpenSSH. The wrapper installer ([`wrappers`]), an option of
//! both, puts one wrapper per command on the agent's PATH and picks one backend for each: native > sidecar > SSH.
//! It uses both programs' parts (it reads `BUILD_SIDECARS` and asks each builder for its commands through
//! `sidecar`'s), so it sits above them: a program's `--install-wrappers` runs the `installer` its binary hands it.
//! The binaries (`src/bin/`) only call into these folders, and bind each program to the installer.
//!
//! What both programs keep alike lives at the root: how a client ends (`exit`) and the one configuration error
//! (`config_error`), its command line ([`argv`]) and variables (`env`), the variables a command gets
//! (`env_sent`), whether it runs on a terminal (`at_a_terminal`), the signals that
//! interrupt it (`interrupt`), the signals sent on to the command (`signals_as_sent`) and dying of the command's
//! (`signal_death`), how text from the other side is made safe for its own line ([`terminal_safe`]), the one guard that puts the local
//! terminal back on every way out (`terminal_guard`), and the
//! installer as a program runs it (`installer`).
//! Nothing at the root knows either program; the programs know the root, and the installer knows them all.

pub mod argv;
pub(crate) mod at_a_terminal;
pub(crate) mod config_error;
pub(crate) mod env;
pub(crate) mod env_sent;
pub(crate) mod exit;
pub(crate) mod installer;
pub(crate) mod interrupt;
pub mod sidecar;
pub(crate) mod signal_death;
pub(crate) mod signals_as_sent;
pub mod ssh;
pub(crate) mod terminal_guard;
pub mod terminal_safe;
pub mod wrappers;
