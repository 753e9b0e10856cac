//! The wrapper installer, an option of both programs (`sidecar-exec --install-wrappers [DIR]`, `ssh-exec
//! --install-wrappers [DIR]`, so an agent image with only one of them can install its wrappers): one wrapper per
//! command that runs elsewhere, for commands the agent image does not have itself, one backend per command: native >
//! sidecar (when its builder has the command) > SSH (when the host has it). [`backends`] reads what the
//! configuration asks for and which client each wrapper runs, `builder_commands` asks each sidecar which commands
//! it has and `host_commands` the SSH host, `answer` is what they said and the policy when one says nothing,
//! `install` writes the folder, [`program`] is the option. A wrapper is a link to its client named after the command; [`called_as`] is
//! how the client reads it.

pub(crate) mod answer;
pub mod backends;
pub(crate) mod builder_commands;
pub mod called_as;
pub(crate) mod host_commands;
pub(crate) mod install;
pub mod program;

pub const DEFAULT_DIR: &str = "/opt/sidecar/wrappers";
/// The wrappers of ssh-exec's own entry points, installed whenever the SSH host is configured.
pub const SSH_TOOLS: [&str; 2] = ["host-run", "auto-run"];
